"""The processes a service and its workloads run as: labelled children, their cores and their environment."""
