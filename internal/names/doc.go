// Package names holds the rules for the three names of an attachment: the
// network name, the container ID and the interface name. Every name that
// the module acts on passes them, whether a request brings it, a config
// file declares it, or a cache file or an order record holds it, so that
// no name can leave the directories it becomes part of the path in, and
// none gets as far as a plugin run that libcni's ADD would refuse.
//
// # Rules
//
// [ValidateName] guards the file system only: no empty name, no ".", no
// "..", no '/', '\\', NUL or other control character.
// [ValidateNetworkName], [ValidateContainerID] and [ValidateIfName] add
// libcni's own checks and the length limits ([MaxNetworkNameLen],
// [MaxContainerIDLen], [MaxIfNameLen]); [ValidateNames] checks all three
// names of one attachment.
//
// # Errors
//
// A rejected name is reported as an *[InvalidNameError] that matches
// [ErrInvalidName]. Package cache re-exports both (cache.ErrInvalidName
// and cache.InvalidNameError are these), so errors.Is and errors.As work
// whichever package the caller names; their text keeps its "cache:"
// prefix for that reason.
//
// # Place
//
// The package sits below both of its users, package netconf (which loads
// config files) and package cache (which names cache files), and imports
// neither, so that no import between the module's packages points up.
package names
