"""Real programs and servers that the benchmarks and the tests both run against.

A vLLM server from the vLLM environment, an OpenAI-compatible server whose faults are chosen, the
target window that logs every input event it receives, the MiniWoB++ DOM oracle, drawn or recorded
routine scenes, and the headless GNOME stack (mutter, PipeWire and the portals; mutter with a hand
on its keyboard layouts) with mutter's own remote desktop as the test's hand. They live here, not
under tests/, because benchmarks import nothing from tests/; the tests import them from here. Like
all of bench/, none of it is in the wheel.
"""
