// Package stream is how a byte stream to a guest is asked for along the
// path controller -> node handler -> launcher: an HTTP request with an
// Upgrade header naming what the stream carries, answered by 101 Switching
// Protocols after which the connection is that stream, or by an error
// status and message. Each side of a hop imports it, so the handshake is
// written once.
package stream
