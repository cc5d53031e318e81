"""Input on wlroots desktops (sway): the virtual-keyboard protocol through wtype (keyboard.py)."""
