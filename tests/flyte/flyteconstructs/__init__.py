"""flytekit workflows for the construct tests (tests/flyte/test_constructs*.py)."""
