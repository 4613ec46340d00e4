"""Pass 1 of the two-pass technique: the links to objects, from a URL template or a harvest.

templates.py expands a template over lists, number ranges and date ranges; harvest.py walks a
site from a root page as spec.py's HarvestSpec says; politeness.py keeps both to robots.txt and
per-host delays; linkfile.py keeps the links and what pass 2 did with each, in files a person can
read, safe across kill -9. linkgen reads no settings module: parser/settings/link_jobs.py builds its specs.
"""
