"""The embedded stack: real Keystone, Redis and PostgreSQL on loopback, for the demo and tests.

One code path starts them for `make demo` (stack.demo) and for the test fixtures
(tests/fixtures/stack.py), so what the tests exercise is what the demo runs.
"""
