"""Start-up hook folder: ``maya emulate`` puts this folder on PYTHONPATH so the
emulated program imports ``sitecustomize.py`` from here (see that file)."""
