"""The input layer: actions become primitive steps once (plan), a backend performs them (x11, portal)."""
