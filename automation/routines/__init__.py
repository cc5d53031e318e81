"""Routines: a finished session saved as steps that replay without the model.

`routine_file` is the file format (a readable TOML file per routine, versioned), `compiler` turns a
recorded session into a routine, `locators` finds each step's target again (cheapest unambiguous
locator first), `effects` checks that a step did what it did when recorded, `replay` runs a routine
through small seams (a performer, a frame source, an approver, an optional model grounder), and
`repair` writes an approved repair back into the routine as a reviewable change.
"""
