"""The Qt (PySide6) application and the command line. The only package that imports Qt."""
