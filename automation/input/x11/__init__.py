"""Input on an X server through XTEST: keys by keysym in the active layout group, pyautogui for the pointer."""
