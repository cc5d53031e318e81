"""Routines: a finished session saved as steps that replay without the model.

`routine_file` is the file format (a readable TOML file per routine, versioned), `compiler` turns a
recorded session into a routine, `locators` finds each step's target again (cheapest unambiguous
locator first), `effects` checks that a step did what it did when recorded, `replay` makes the routine
the step engine's proposer (a replay is a run of `automation.engine.StepEngine`, with its approval,
stop, recording and clean-up), `pictures` reads and writes a routine's pictures safely, and `repair`
writes an approved repair back into the routine as a reviewable change.
"""
