"""The main screen and the modal questions pushed over it."""
