"""Everything that touches the desktop without Qt and without a model.

Action types, key names, screen capture, coordinate conversion, the input layer (X11 and portal backends),
the step engine and trajectories live here. This package imports neither `app` nor `inference`.
"""
