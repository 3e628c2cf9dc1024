module github.com/kvidx/kvidx/examples/go-router

go 1.26.0

require (
	github.com/kvidx/kvidx/bindings/go v0.0.0
	github.com/nats-io/nats.go v1.55.0
)

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	github.com/go-zeromq/zmq4 v0.17.0 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/kvidx/kvidx/bindings/go => ../../bindings/go
