module github.com/kvidx/kvidx/bindings/go

go 1.26

require (
	github.com/ebitengine/purego v0.11.3
	github.com/go-zeromq/zmq4 v0.17.0
)

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	golang.org/x/sync v0.7.0 // indirect
	golang.org/x/text v0.15.0 // indirect
)
