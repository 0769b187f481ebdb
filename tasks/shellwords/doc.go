// Package shellwords splits a string of command-line options into words
// as a POSIX shell would, without expanding anything, for the params that
// take a command line (virtctl create vm flags, ssh-keygen options).
package shellwords
