module example.com/rlexample

go 1.23

require github.com/corestream/corestream/go/remoteledger v0.0.0

replace github.com/corestream/corestream/go/remoteledger => ../remoteledger
