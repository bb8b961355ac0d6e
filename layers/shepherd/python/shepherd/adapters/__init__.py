"""AWS adapters of the ports (DynamoDB, SQS, EventBridge, S3, Lambda event source mappings).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""
