"""Real programs and servers that the benchmarks and the tests both run against.

A vLLM server from the vLLM environment, an OpenAI-compatible server whose faults are chosen, the
target window that logs every input event it receives, the MiniWoB++ DOM oracle, and drawn or
recorded routine scenes. They live here, not under tests/, because benchmarks import nothing from
tests/; the tests import them from here. Like all of bench/, none of it is in the wheel.
"""
