package logstore

// sysSyncfs is syncfs(2) on linux/amd64.
const sysSyncfs = 306
