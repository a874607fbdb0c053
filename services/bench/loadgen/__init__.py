"""The load generator: requests, streamed responses, timing and windows."""
