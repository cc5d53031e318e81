"""wlroots desktops (sway): their monitors (sway_outputs.py) and screenshots through screencopy (capture.py)."""
