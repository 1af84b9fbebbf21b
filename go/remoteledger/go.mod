module github.com/corestream/corestream/go/remoteledger

go 1.23
