export LANG=C.UTF-8
