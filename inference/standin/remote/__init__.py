"""The tiny VLM's remote code: copied into each built checkpoint and loaded from there with trust_remote_code."""
