//! Luanti mod storage: mod_storage.sqlite and the files backend.
