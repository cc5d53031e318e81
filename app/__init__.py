"""Holodesk's front ends: the Qt tray application (`gui`), the command line (`cli`), and what both use (`common`)."""
