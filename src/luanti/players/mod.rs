//! Luanti players: the player file format, players.sqlite (both schemas) and the files backend.
