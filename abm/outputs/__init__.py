"""Result tables, the summary, the manifest and the run folder."""
