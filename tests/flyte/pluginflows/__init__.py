"""Flytekit tasks of plugin types (flytekitplugins-ray and -dask, ContainerTask), in a package
of their own: `pyflyte --pkgs flyteflows` in other tests does not need the plugin packages."""
