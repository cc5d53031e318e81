"""`holodesk eval` and `holodesk annotate`: measuring a model with Holodesk's own loop, and batch work.

MiniWoB++ tasks run in a real Chromium window (miniwob_browser), driven by the step engine
(miniwob_eval); grounding sets are scored point-in-box (grounding); annotate sends many
localization requests at once (annotate). Episodes run in parallel on private desktops (desktop,
workers, episode_worker, parallel) or on a Ray cluster (ray_backend; annotate's: ray_annotate).
Nothing here imports Qt.
"""
