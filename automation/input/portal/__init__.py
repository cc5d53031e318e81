"""Input on a Wayland desktop through the RemoteDesktop portal's Notify methods."""
