"""Input on wlroots desktops (sway): the virtual-keyboard protocol through wtype (keyboard.py), the
virtual-pointer protocol through pywayland (pointer.py, declared in virtual_pointer_protocol.py)."""
