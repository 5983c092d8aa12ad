// Package calllog is the on-disk call log that the fake CNI plugins under
// internal/testplugins write and that tests read back.
//
// # Format
//
// The log is JSON Lines: one [Call] object per line, appended by [Append]
// with a single write to a file opened with O_APPEND, so that concurrent
// plugin processes never interleave their lines. A plugin appends its line
// before it acts, so failing and crashing calls are recorded too.
//
// # Reading
//
// [Read] returns every call in order and treats a missing file as an empty
// log (the plugin was never called). [Filter] selects calls by verb.
package calllog
