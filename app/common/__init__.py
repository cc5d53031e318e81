"""What the tray app and the command line share: settings, building a policy, the running instance's address."""
