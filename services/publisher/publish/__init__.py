"""Publishing: the outbox, transports (file, S3), credentials and the review record."""
