// Package guard is the boundary between our goroutines and code we do not
// own. A panic inside a dependency (libcni's result converters have
// panicked on hostile cache files) must become an error the caller can
// act on, never the host process's crash: every call from the engine's
// goroutines into libcni goes through [Do] or [Value].
package guard
