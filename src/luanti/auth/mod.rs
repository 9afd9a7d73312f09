//! Luanti auth: auth.txt lines from auth.sqlite or the real auth.txt.
