package cni

import "errors"

// Errors of the go-cni API. Match them with errors.Is or with the Is
// helpers below; the errors this package returns wrap them with %w.
var (
	// ErrCNINotInitialized means fewer networks are loaded than
	// [WithMinNetworkCount] asks for, or the conf dir holds none.
	ErrCNINotInitialized = errors.New("cni plugin not initialized")
	// ErrInvalidConfig means a network configuration could not be used.
	ErrInvalidConfig = errors.New("invalid cni config")
	// ErrNotFound means a config or a result is missing.
	ErrNotFound = errors.New("not found")
	// ErrRead means the conf dir or a config file could not be read.
	ErrRead = errors.New("failed to read config file")
	// ErrInvalidResult means a plugin's result could not be used.
	ErrInvalidResult = errors.New("invalid result")
	// ErrLoad means an option given to Load failed.
	ErrLoad = errors.New("failed to load cni config")
)

// IsCNINotInitialized reports whether err matches [ErrCNINotInitialized].
func IsCNINotInitialized(err error) bool { return errors.Is(err, ErrCNINotInitialized) }

// IsInvalidConfig reports whether err matches [ErrInvalidConfig].
func IsInvalidConfig(err error) bool { return errors.Is(err, ErrInvalidConfig) }

// IsNotFound reports whether err matches [ErrNotFound].
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsReadFailure reports whether err matches [ErrRead].
func IsReadFailure(err error) bool { return errors.Is(err, ErrRead) }

// IsInvalidResult reports whether err matches [ErrInvalidResult].
func IsInvalidResult(err error) bool { return errors.Is(err, ErrInvalidResult) }
