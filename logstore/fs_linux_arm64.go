package logstore

// sysSyncfs is syncfs(2) on linux/arm64.
const sysSyncfs = 267
