"""The `holodesk` command line: doctor, run, locate, history, trigger. No Qt is imported here."""
