"""Capture and input for Wayland sessions through the desktop portal (RemoteDesktop + ScreenCast).

On Wayland, mss and pyautogui reach only XWayland windows. This package opens one portal session
per run (`portal.PortalSession`), reads its PipeWire stream with GStreamer (`stream.FrameStream`),
and offers the same frame source (`capture.WaylandCapture`) as the X11 path; its input backend is
automation.input.portal. The engine does not know which one it drives.
"""
