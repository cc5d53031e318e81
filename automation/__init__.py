"""Everything that touches the desktop without Qt and without a model.

Action types, key names, screen capture, coordinate conversion, the pyautogui executor,
the step engine and trajectories live here. This package imports neither `app` nor `inference`.
"""
