"""The report: the bundle read into a model, its figures and the rendered document."""
