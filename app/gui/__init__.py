"""The Qt (PySide6) tray application: tray, hotkeys, prompt, overlay, approval panel, settings and history windows.

The only package that imports Qt, and only through `holodesk.app.gui.qt`.
"""
