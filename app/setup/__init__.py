"""`holodesk setup`: choose a model that fits this computer, download it with progress, and make it the one used.

One job per module: `catalog` (the models that fit, from the memory plan doctor makes), `step_estimate`
(a short measurement of this machine, scaled to a model's shapes), `hub_listing` (what the Hugging Face
hub says about a repository: files, checksums, licence, gating), `hub_download` (the download itself,
staged and verified), `choices` (the one list the first-run window and the terminal offer), `remote_check`
(a server's URL checked by asking it), `choose` (the chosen model or server written into the settings)
and `command` (the terminal conversation).
"""
