package ocicni

// InitCNI takes a binary directory in which to search for CNI plugins, and
// a configuration directory in which to search for CNI JSON config files.
// If no valid CNI configs exist, network requests will fail until valid CNI
// config files are present in the config directory.
// If defaultNetName is not empty, a CNI config with that network name will
// be used as the default CNI network, and container network operations will
// fail until that network config is present and valid.
// If defaultNetName is empty, CNI config files should be reloaded real-time and
// defaultNetName should be changeable and determined by file sorting.
func InitCNI(defaultNetName, confDir string, binDirs ...string) (CNIPlugin, error) {
	return New(WithDefaultNetwork(defaultNetName), WithConfDir(confDir), WithBinDirs(binDirs...))
}

// InitCNIWithCache works like InitCNI except that it takes the cni cache directory as third param.
func InitCNIWithCache(defaultNetName, confDir, cacheDir string, binDirs ...string) (CNIPlugin, error) {
	return New(WithDefaultNetwork(defaultNetName), WithConfDir(confDir), WithCacheDir(cacheDir),
		WithBinDirs(binDirs...))
}

// InitCNINoInotify works like InitCNI except that it does not use inotify to watch for changes in the CNI config dir.
func InitCNINoInotify(defaultNetName, confDir, cacheDir string, binDirs ...string) (CNIPlugin, error) {
	return New(WithDefaultNetwork(defaultNetName), WithConfDir(confDir), WithCacheDir(cacheDir),
		WithBinDirs(binDirs...), WithoutWatcher())
}
