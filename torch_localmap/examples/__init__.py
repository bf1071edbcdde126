"""Small example models used by the demo, the docs and the tests."""
