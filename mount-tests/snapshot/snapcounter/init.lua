-- Mount test 93 (--snapshot): every server step writes the same counter into the metadata
-- field `counter` of node A (-27,5,-27: block -2,0,-2) and of node B (85,5,85: block 5,0,5),
-- so that each save of the map (ServerMap::save: every block modified since the last save,
-- in one transaction) holds one value in both.
-- Both blocks are emerged first: B is outside the world mkworld.sh makes, and a force-load
-- alone only loads a stored block (a stored but ungenerated one stays all `ignore`). Then
-- both are force-loaded (transiently: nothing written to force_loaded.txt) so that neither
-- is unloaded. Not block 0,0,0: force-loaded, it runs the node timer of the furnace that
-- mkworld.sh placed without its inventory, whose error 17.5 s in stops the server.
-- Counting starts once both are force-loaded and skips any step in which one is not in
-- memory: the two fields never differ in memory when the map is saved.
-- Does nothing unless the server's config sets `snapcounter = true`: a probe of a copy of
-- the world, which has this mod in worldmods/, must not change what it reads.
if not minetest.settings:get_bool("snapcounter", false) then return end

local A = {x = -27, y = 5, z = -27}
local B = {x = 85, y = 5, z = 85}
local forced = false
local counter

minetest.after(0, function()
  local left = 2
  local function emerged(_, _, remaining)
    if remaining > 0 then return end
    left = left - 1
    if left > 0 then return end
    minetest.forceload_block(A, true)
    minetest.forceload_block(B, true)
    forced = true
    minetest.log("action", "snapcounter: both blocks emerged and force-loaded")
  end
  minetest.emerge_area(A, A, emerged)
  minetest.emerge_area(B, B, emerged)
end)

minetest.register_globalstep(function()
  if not (forced and minetest.get_node_or_nil(A) and minetest.get_node_or_nil(B)) then return end
  if not counter then
    -- Nodes without behaviour (no liquid flows into them, no timer) carry the fields.
    counter = math.max(minetest.get_meta(A):get_int("counter"), minetest.get_meta(B):get_int("counter"))
    minetest.set_node(A, {name = "default:mese"})
    minetest.set_node(B, {name = "default:mese"})
    minetest.log("action", "snapcounter: counting from " .. counter)
  end
  counter = counter + 1
  minetest.get_meta(A):set_string("counter", tostring(counter))
  minetest.get_meta(B):set_string("counter", tostring(counter))
  if counter % 100 == 0 then minetest.log("action", "snapcounter: " .. counter) end
end)
