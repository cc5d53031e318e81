"""Input on an X server through XTEST.

`backend` performs the input layer's primitives (pyautogui for the pointer); `keyboard` types and
presses keys by keysym in the active XKB group (`xkb` declares the XKB requests python-xlib lacks);
`selection` owns the CLIPBOARD and PRIMARY selections for a paste and gives them back once the
target took the text; `focus_guard` hands the keyboard focus back to the user's window before keys go out.
`release` lets go of what a killed run left held (automation/held_input.py finds it from its markers).
"""
